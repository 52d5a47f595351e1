# frozen_string_literal: true

require "ferrolock/testing"

module Ferrolock
  module Testing
    # Minitest (and ActiveSupport::TestCase): every test starts with no fake state, and leaves the
    # mode as it found it (a test may call Ferrolock::Testing.disable! without a block).
    #
    #   require "ferrolock/testing/minitest"
    #   class ReportJobTest < Minitest::Test
    #     include Ferrolock::Testing::Minitest
    #   end
    module Minitest
      def before_setup
        @ferrolock_mode = Testing.mode
        Testing.reset_for_test!
        super
      end

      def after_teardown
        super
      ensure
        Testing.use(@ferrolock_mode) if @ferrolock_mode
      end
    end
  end
end
