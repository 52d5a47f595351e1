# frozen_string_literal: true

module Ferrolock
  # The cohort hand-off's one setting, shared by DistMutex and ConcurrentLimiter: how many times in
  # a row a release may pass the lock (or slot) to a waiting thread of its own process without
  # Redis (the native side bounds it by time too, and explains it: ext/ferrolock-core/src/cohort.rs).
  module Cohort
    LOCAL_PASSES = 8
    # A Redis acquisition reserves the 15 fencing tokens above its own for its cohort.
    MAX_LOCAL_PASSES = 15

    module_function

    # local_passes: validated (an Integer, 0 up to MAX_LOCAL_PASSES).
    def local_passes!(value)
      value = Validate.count!(:local_passes, value, min: 0)
      raise ArgumentError, "local_passes must be at most #{MAX_LOCAL_PASSES}, got #{value}" if value > MAX_LOCAL_PASSES

      value
    end
  end
end
