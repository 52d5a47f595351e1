# frozen_string_literal: true

module Ferrolock
  class Admin
    # One hold given up by a force release (Release).
    Released = Struct.new(:kind, :name, :token, keyword_init: true)
  end
end
