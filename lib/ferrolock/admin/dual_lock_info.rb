# frozen_string_literal: true

require_relative "reading"
require_relative "holder"

module Ferrolock
  class Admin
    # One DualLock stage (EXEC: the duplicate running; WAIT: the one waiting): its token, the
    # TTL left (seconds) and holder (Holder).
    Stage = Struct.new(:token, :ttl, :holder, keyword_init: true) do
      # The stage stored under `part` of `name` (a DualLock's "exec"/"wait", a DistMutex's
      # "lock"), or nil when free.
      def self.read(client, keys, name, part)
        token = client.call("GET", keys.key(name, part)) or return nil
        new(token: token, ttl: Reading.ttl(client.call("PTTL", keys.key(name, part))),
            holder: Holder.from_token(token))
      end

      def to_h
        super.merge(holder: holder&.to_h)
      end
    end

    # A DualLock as Redis has it: each stage, or nil when free.
    DualLockInfo = Struct.new(:name, :exec, :wait, keyword_init: true) do
      def kind
        :dual_lock
      end

      def held?
        !(exec.nil? && wait.nil?)
      end

      def to_h
        { kind: kind, name: name, exec: exec&.to_h, wait: wait&.to_h }
      end

      # nil when neither stage is held.
      def self.read(client, keys, name)
        info = new(name: name, exec: Stage.read(client, keys, name, "exec"),
                   wait: Stage.read(client, keys, name, "wait"))
        info.held? ? info : nil
      end
    end
  end
end
