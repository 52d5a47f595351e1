# frozen_string_literal: true

require_relative "reading"
require_relative "lease_info"

module Ferrolock
  class Admin
    # A DualLock as Redis has it: each stage (LeaseInfo), or nil when free.
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
      def self.read(client, name)
        state = Reading.state(client, :dual_lock, name) or return nil
        new(name: name, exec: LeaseInfo.from(state[:exec]), wait: LeaseInfo.from(state[:wait]))
      end
    end
  end
end
