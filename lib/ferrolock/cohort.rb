# frozen_string_literal: true

module Ferrolock
  # The cohort hand-off's one setting, shared by DistMutex and ConcurrentLimiter: how many times in
  # a row a release may pass the lock (or slot) to a waiting thread of its own process without
  # Redis (the native side bounds it by time too, and explains it: ext/ferrolock-core/src/line/cohort.rs).
  # Both numbers are the core's (Native::Cohort, loaded by native_library.rb before this file).
  module Cohort
    LOCAL_PASSES = Native::Cohort::DEFAULT_LOCAL_PASSES
    # A Redis acquisition reserves the fencing tokens of its block above its own for its cohort.
    MAX_LOCAL_PASSES = Native::Cohort::MAX_LOCAL_PASSES

    module_function

    # local_passes: validated (an Integer, 0 up to MAX_LOCAL_PASSES).
    def local_passes!(value)
      value = Validate.count!(:local_passes, value, min: 0)
      raise ArgumentError, "local_passes must be at most #{MAX_LOCAL_PASSES}, got #{value}" if value > MAX_LOCAL_PASSES

      value
    end
  end
end
