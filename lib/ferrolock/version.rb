# frozen_string_literal: true

module Ferrolock
  VERSION = "0.2.0"
end
