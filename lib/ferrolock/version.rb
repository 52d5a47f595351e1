# frozen_string_literal: true

module Ferrolock
  VERSION = "0.1.0"
end
