# frozen_string_literal: true

module Ferrolock
  class Admin
    # One fair_tenant_queues rule's state for a tenant: `counted` enqueues within `per` seconds
    # (estimated in :bounded mode) against its threshold.
    RuleCount = Struct.new(:queue, :threshold, :per, :counted, keyword_init: true) do
      def broken?
        counted > threshold
      end
    end
  end
end
