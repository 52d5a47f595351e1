# frozen_string_literal: true

module FerrolockTest
  # Storms of Thread#raise: a worker runs with asynchronous exceptions deferred and lets them in only
  # around each call (interruptibly), so an injected exception lands in its rescue, never between calls.
  module InterruptStorm
    # The block's value with asynchronous exceptions let in; nil when one of cut_short ended it.
    def interruptibly(*cut_short, &block)
      Thread.handle_interrupt(Object => :immediate, &block)
    rescue *cut_short
      nil
    end
  end
end
