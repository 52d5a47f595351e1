# frozen_string_literal: true

module Ferrolock
  class Admin
    # The other namespaces holding keys shaped like ferrolock's (the core's admin/layout.rs): the
    # `ferrolock` command names them when a listing comes back empty (the usual cause: the app sets
    # c.namespace in an initializer the command did not load).
    #
    # A bounded sample, never KEYS: SCAN with COUNT per call, stopping after about MAX_KEYS keys
    # scanned or MAX_SECONDS, whichever comes first (unlike Scanner, which pages until it has
    # enough matches). On a big keyspace it may miss a namespace; it then names fewer, never a
    # wrong one. On a Redis Cluster it goes through the masters in turn, as Scanner does.
    class NamespaceProbe
      # Keys shaped like ferrolock's in any namespace (the core's layout).
      MATCH = Native::Admin::ANY_NAMESPACE
      COUNT = 500
      MAX_KEYS = 5_000
      MAX_SECONDS = 0.5

      def initialize(client)
        @client = client
      end

      # Up to `limit` namespaces other than the client's, the one with the most keys seen first.
      def others(limit: 3)
        seen = Hash.new(0)
        sample { |key| (namespace = namespace_of(key)) && seen[namespace] += 1 }
        seen.delete(@client.namespace)
        seen.sort_by { |namespace, count| [-count, namespace] }.first(limit).map(&:first)
      end

      # The namespace of a key shaped like ferrolock's, or nil.
      def self.namespace_of(key)
        Native::Admin.namespace_of(key)
      end

      private

      def namespace_of(key)
        self.class.namespace_of(key)
      end

      def sample(&block)
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + MAX_SECONDS
        node = 0
        position = "0"
        (MAX_KEYS / COUNT).times do
          position, batch, masters = Native::Admin.scan(@client.native, node, position, MATCH, COUNT)
          batch.each(&block)
          if position == "0" # this master is done: on to the next one, if any
            node += 1
            break if node >= masters
          end
          break if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        end
      end
    end
  end
end
