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
    # A limiter's slot has no fencing tokens: its passes are bounded by this and the window alone.
    MAX_SLOT_PASSES = Native::Cohort::MAX_SLOT_PASSES

    module_function

    # local_passes: validated (an Integer, 0 up to `most`).
    def local_passes!(value, most = MAX_LOCAL_PASSES)
      value = Validate.count!(:local_passes, value, min: 0)
      raise ArgumentError, "local_passes must be at most #{most}, got #{value}" if value > most

      value
    end
  end
end
