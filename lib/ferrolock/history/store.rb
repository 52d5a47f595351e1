# frozen_string_literal: true

module Ferrolock
  module History
    # History's Redis side: one script adds a whole flush (every minute and hour bucket it touches,
    # their expiry, the field cap), another reads one name's fields out of many buckets. Each is one
    # round trip; every key shares the {history} slot.
    module Store
      # KEYS: a minute hash and its hour hash per minute flushed. ARGV: the two field caps, the
      # rollup name, the number of minutes, their two expiry times each, then (minute index, field,
      # count) triples. A field new to a full hash goes to its primitive's and counter's rollup.
      WRITE = <<~LUA
        local caps, rollup, minutes = {tonumber(ARGV[1]), tonumber(ARGV[2])}, ARGV[3], tonumber(ARGV[4])
        local function add(key, cap, field, count)
          if redis.call('HEXISTS', key, field) == 0 and redis.call('HLEN', key) >= cap then
            local first = string.find(field, '|', 1, true)
            local second = string.find(field, '|', first + 1, true)
            field = string.sub(field, 1, second) .. rollup
          end
          redis.call('HINCRBY', key, field, count)
        end
        for i = 5 + 2 * minutes, #ARGV, 3 do
          local at = tonumber(ARGV[i])
          for step = 1, 2 do add(KEYS[2 * at - 2 + step], caps[step], ARGV[i + 1], ARGV[i + 2]) end
        end
        for k = 1, #KEYS do redis.call('EXPIREAT', KEYS[k], ARGV[4 + k]) end
        return #KEYS
      LUA

      # KEYS: buckets. ARGV: the name. Returns { key index, primitive, counter, count } flattened,
      # for the fields of that name only.
      READ = <<~LUA
        local out = {}
        for k = 1, #KEYS do
          local all = redis.call('HGETALL', KEYS[k])
          for i = 1, #all, 2 do
            local first = string.find(all[i], '|', 1, true)
            local second = first and string.find(all[i], '|', first + 1, true)
            if second and string.sub(all[i], second + 1) == ARGV[1] then
              table.insert(out, k)
              table.insert(out, string.sub(all[i], 1, first - 1))
              table.insert(out, string.sub(all[i], first + 1, second - 1))
              table.insert(out, all[i + 1])
            end
          end
        end
        return out
      LUA

      # KEYS: buckets. ARGV: "<primitive>|". Returns { key index, counter, name, count } flattened, for
      # that primitive's event counters (not its wait or hold steps).
      READ_KIND = <<~LUA
        local out, prefix = {}, ARGV[1]
        for k = 1, #KEYS do
          local all = redis.call('HGETALL', KEYS[k])
          for i = 1, #all, 2 do
            if string.sub(all[i], 1, #prefix) == prefix then
              local rest = string.sub(all[i], #prefix + 1)
              local bar = string.find(rest, '|', 1, true)
              local counter = string.sub(rest, 1, bar - 1)
              if not string.match(counter, '^[wh]%d+$') then
                table.insert(out, k)
                table.insert(out, counter)
                table.insert(out, string.sub(rest, bar + 1))
                table.insert(out, all[i + 1])
              end
            end
          end
        end
        return out
      LUA

      module_function

      # Adds counts ({ [minute start, field] => count }) to Redis.
      def write(client, counts)
        minutes = counts.keys.map(&:first).uniq.sort
        return if minutes.empty?

        index = minutes.each_with_index.to_h { |minute, i| [minute, i + 1] }
        keys, expiries = minutes.flat_map { |minute| buckets(client, minute) }.transpose
        triples = counts.flat_map { |(minute, field), count| [index.fetch(minute), field, count] }
        args = [Buckets::MAX_FIELDS.fetch("m"), Buckets::MAX_FIELDS.fetch("h"), Buckets::ROLLUP, minutes.size]
        client.call("EVAL", WRITE, keys.size, *keys, *args, *expiries, *triples)
      end

      # [[minute hash, its expiry], [hour hash, its expiry]] of the minute starting at minute.
      def buckets(client, minute)
        hour = Buckets.start_of(minute, Buckets::HOUR)
        [[Buckets.key(client, Buckets::MINUTE, minute), Buckets.expires_at(Buckets::MINUTE, minute)],
         [Buckets.key(client, Buckets::HOUR, hour), Buckets.expires_at(Buckets::HOUR, hour)]]
      end

      # [[bucket start, event, name, count], ...] of primitive in the buckets of step starting at starts.
      def read_kind(client, step, starts, primitive)
        keys = starts.map { |start| Buckets.key(client, step, start) }
        client.call("EVAL", READ_KIND, keys.size, *keys, "#{primitive}#{Buckets::SEPARATOR}").each_slice(4)
              .map { |k, event, name, count| [starts.fetch(k - 1), event, name, Integer(count)] }
      end

      # [[bucket start, primitive, counter, count], ...] of name in the buckets of step starting at
      # starts.
      def read(client, step, starts, name)
        return [] if starts.empty?

        keys = starts.map { |start| Buckets.key(client, step, start) }
        client.call("EVAL", READ, keys.size, *keys, name).each_slice(4).map do |k, primitive, counter, count|
          [starts.fetch(k - 1), primitive, counter, Integer(count)]
        end
      end
    end
  end
end
