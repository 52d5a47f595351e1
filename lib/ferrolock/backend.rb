# frozen_string_literal: true

module Ferrolock
  # Where the primitives get their native objects: Ferrolock::Native's class of that name, built on
  # the client's Redis connection. `require "ferrolock/testing"` installs a factory whose objects
  # follow Ferrolock::Testing's mode (Redis, process memory, or always granted); without it this is
  # one instance-variable test per object made.
  module Backend
    @factory = nil

    class << self
      # The installed factory (nil: Ferrolock::Native). Only ferrolock/testing sets it.
      attr_accessor :factory

      # A new native object: kind names a Ferrolock::Native class (:DistMutex ...), args follow the
      # client that its constructor takes first.
      def build(kind, client, *args)
        factory = @factory
        return factory.build(kind, client, *args) if factory

        Native.const_get(kind, false).new(client.native, *args)
      end

      # FairTenant's one Redis call for one enqueue (rules: a FairTenant::Rules).
      def fair_tenant_check(client, rules, *args)
        factory = @factory
        return factory.fair_tenant_check(client, rules, *args) if factory

        Native::FairTenant.check(client.native, rules.native, *args)
      end

      # True when the middlewares pass every job through untouched (Ferrolock::Testing.disable!).
      def pass_through?
        factory = @factory
        factory ? factory.pass_through? : false
      end
    end
  end
end
