# frozen_string_literal: true

module Ferrolock
  class Admin
    # One page of a SCAN: never KEYS, which blocks Redis for the whole keyspace. Each SCAN call
    # asks for COUNT = 4 x per_page keys (a bounded amount of work per call: 40..4,000); a page
    # takes whole SCAN replies until it has `per_page` wanted keys (the block says which),
    # MAX_CALLS calls were made, or the iteration ended. A page may hold more than per_page keys
    # (a reply is never cut: its cursor would skip the rest), and SCAN may return a key twice
    # across pages (Redis' guarantee is "at least once"). On a Redis Cluster every master is
    # scanned in turn (Native::Admin.scan runs SCAN on master number `node`): the cursor is then
    # "<node>.<SCAN cursor>" past the first master.
    class Scanner
      MAX_CALLS = 20
      MAX_CURSOR = (2**64) - 1

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
        node, position = cursor.include?(".") ? cursor.split(".", 2) : ["0", cursor]
        node = Integer(node, 10)
        keys = []
        done = false
        MAX_CALLS.times do
          position, batch, masters = Native::Admin.scan(@client.native, node, position, match, [per_page * 4, 40].max)
          keys.concat(wanted ? batch.select(&wanted) : batch)
          if position == "0" # this master is done: on to the next one, if any
            node += 1
            done = node >= masters
          end
          break if done || keys.size >= per_page
        end
        Page.new(items: keys.uniq, cursor: Scanner.cursor(done, node, position))
      end

      # "0" when every master was scanned; "<SCAN cursor>" on the first, "<node>.<cursor>" after.
      def self.cursor(done, node, position)
        return "0" if done

        node.zero? ? position : "#{node}.#{position}"
      end

      def self.cursor!(value)
        # `case`, not value.is_a?: a BasicObject has no is_a? (Validate's rule).
        value = case value
                when nil, "" then "0"
                when Integer then value.to_s
                else value
                end
        case value
        when String then return value if cursor_text?(value)
        end
        raise ArgumentError, "cursor must be a SCAN cursor (digits), got #{Validate.show(value)}"
      end

      # Digits, optionally after "<node>.", in any ASCII-compatible encoding (a UTF-16 or broken
      # String would raise in the match, not name the cursor); SCAN's cursor is an unsigned
      # 64-bit number (Redis refuses a larger one).
      def self.cursor_text?(value)
        value.valid_encoding? && value.encoding.ascii_compatible? && value.match?(/\A(\d{1,4}\.)?\d{1,20}\z/) &&
          Integer(value.split(".").last, 10) <= MAX_CURSOR
      end

      def self.per_page!(value)
        Validate.count!(:per_page, value, min: 1).clamp(1, 1000)
      end
    end
  end
end
