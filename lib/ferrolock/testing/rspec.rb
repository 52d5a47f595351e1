# frozen_string_literal: true

require "rspec/core"
require "ferrolock/testing"

# RSpec: every example starts with no fake state, and leaves the mode as it found it. Metadata
# picks an example's or group's mode:
#
#   require "ferrolock/testing/rspec"
#   it "throttles", ferrolock: :fake do ... end
#   describe "with locks out of the way", ferrolock: :disable do ... end
#   it "talks to Redis", ferrolock: :real do ... end
RSpec.configure do |config|
  config.around do |example|
    Ferrolock::Testing.reset_for_test!
    mode = example.metadata[:ferrolock]
    previous = Ferrolock::Testing.mode
    begin
      mode.nil? ? example.run : Ferrolock::Testing.use(mode) { example.run }
    ensure
      Ferrolock::Testing.use(previous)
    end
  end
end
