# frozen_string_literal: true

require "json"

module Ferrolock
  class Admin
    # Who holds a lock, slot or DualLock stage. Not recorded yet: the acquisition scripts will
    # write it (see doc/ARCHITECTURE.md, "Holder metadata") to the hash `<ns>:{<name>}:holder`,
    # one JSON field per token. Until then every holder reads as nil and is shown as "—".
    Holder = Struct.new(:host, :pid, :thread, :since, :job_class, :jid, keyword_init: true) do
      # The holder recorded for `token` under `name`, or nil.
      def self.read(client, keys, name, token)
        return nil if token.nil?

        raw = client.call("HGET", keys.key(name, "holder"), token) or return nil
        fields = JSON.parse(raw)
        fields.is_a?(Hash) ? new(**fields.slice(*members.map(&:to_s)).transform_keys(&:to_sym)) : nil
      rescue JSON::ParserError
        nil
      end

      def to_h
        super.compact
      end
    end
  end
end
