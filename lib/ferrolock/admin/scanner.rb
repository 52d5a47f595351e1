# frozen_string_literal: true

module Ferrolock
  class Admin
    # One page of a SCAN: never KEYS, which blocks Redis for the whole keyspace. Each SCAN call
    # asks for COUNT = 4 x per_page keys (a bounded amount of work per call: 40..4,000); a page
    # takes whole SCAN replies until it has `per_page` wanted keys (the block says which),
    # MAX_CALLS calls were made, or the iteration ended. A page may hold more than per_page keys
    # (a reply is never cut: its cursor would skip the rest), and SCAN may return a key twice
    # across pages (Redis' guarantee is "at least once").
    class Scanner
      MAX_CALLS = 20

      # cursor "0" starts; the returned cursor "0" means the iteration is complete.
      Page = Struct.new(:items, :cursor, keyword_init: true) do
        def last?
          cursor == "0"
        end
      end

      def initialize(client)
        @client = client
      end

      def scan(match, cursor: "0", per_page: 25, &wanted)
        keys = []
        MAX_CALLS.times do
          cursor, batch = @client.call("SCAN", cursor, "MATCH", match, "COUNT", [per_page * 4, 40].max)
          keys.concat(wanted ? batch.select(&wanted) : batch)
          break if cursor == "0" || keys.size >= per_page
        end
        Page.new(items: keys.uniq, cursor: cursor)
      end

      def self.cursor!(value)
        value = "0" if value.nil? || value == ""
        value = value.to_s if value.is_a?(Integer)
        raise ArgumentError, "cursor must be a SCAN cursor (digits), got #{Validate.show(value)}" unless
          value.is_a?(String) && value.match?(/\A\d{1,20}\z/)

        value
      end

      def self.per_page!(value)
        Validate.count!(:per_page, value, min: 1).clamp(1, 1000)
      end
    end
  end
end
