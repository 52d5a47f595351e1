# frozen_string_literal: true

module Ferrolock
  module Testing
    # The in-memory backends of Testing.fake!: each implements its Ferrolock::Native class's
    # interface on Testing.store, with Testing.now as Redis' clock. A lease renewed while its
    # holder lives (a DistMutex hold, a slot, a DualLock turn, a message in progress) never expires
    # here: the process that would stop renewing it is this one.
    module Fake
      # A key in the store: the server and namespace (as Redis keys are apart per both), then parts.
      def self.place(client, *parts)
        [client.redacted_url, client.namespace, *parts].freeze
      end

      # The table's entry at place, or nil once the time the block reads from it (a Testing.now
      # time; nil: it does not expire) has come, and the entry is then removed: a key Redis let
      # expire. Inside Store#synchronize.
      def self.live(table, place)
        entry = table[place]
        expires_at = entry && yield(entry)
        return entry if expires_at.nil? || Testing.now < expires_at

        table.delete(place)
        nil
      end
    end
  end
end
