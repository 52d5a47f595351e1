# frozen_string_literal: true

module Ferrolock
  class Admin
    # What the app's RateLimiter of a name and kind passes (RateInfo.definitions).
    RateDefinition = Struct.new(:name, :kind, :limit, :interval, :burst, keyword_init: true)
  end
end
