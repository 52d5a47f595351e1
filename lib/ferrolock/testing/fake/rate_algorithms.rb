# frozen_string_literal: true

module Ferrolock
  module Testing
    module Fake
      # The rate limiter scripts (ext/ferrolock-core/lua/rate_limiter/) in Ruby, on a Hash as the
      # key and µs as times. claim returns [true, calls left, slot, µs until it] or [false, µs
      # until the next slot]; status [remaining, µs until full].
      module RateAlgorithms
        def self.for(kind, count, interval, burst)
          case kind
          when "window" then Window.new(count, interval)
          when "sliding_window" then SlidingWindow.new(count, interval)
          else
            emission = interval / count
            Gcra.new(emission, kind == "leaky" ? burst * emission : interval - emission)
          end
        end

        # What both window kinds count: count calls per interval µs.
        class Windowed
          def initialize(count, interval)
            @count = count
            @interval = interval
          end
        end

        # Fixed windows aligned to the epoch; a full window's caller reserves a place in the next.
        class Window < Windowed
          def claim(state, now, _cost, wait_timeout, id)
            window = (now / @interval).floor
            used = 0
            window, used = state.values_at(:w, :n) if state[:w] && state[:w] >= window
            if used >= @count
              window += 1
              used = 0
            end
            wait = [0, (window * @interval) - now].max
            return [false, wait] if wait > wait_timeout

            state.update(w: window, n: used + 1, id: id)
            [true, @count - used - 1, now + wait, wait]
          end

          def status(state, now)
            window = (now / @interval).floor
            latest, used = state.values_at(:w, :n)
            if latest && used <= 0
              latest -= 1
              used = @count
            end
            return [@count, 0] if latest.nil? || latest < window

            [latest == window ? [0, @count - used].max : 0, ((latest + 1) * @interval) - now]
          end

          def refund(state, id, cost)
            return unless state[:id] == id

            state[:n] -= cost
            state.delete(:id)
          end
        end

        # A log of calls (id => µs they go ahead at, in the future when reserved).
        class SlidingWindow < Windowed
          def claim(state, now, _cost, wait_timeout, id)
            state.delete_if { |_, at| at <= now - @interval }
            times = state.values.sort
            slot = [now, times.last || now].max
            slot = [slot, times[times.size - @count] + @interval].max if times.size >= @count
            wait = slot - now
            return [false, wait] if wait > wait_timeout

            before = wait.positive? ? times.count { |at| at > slot - @interval } : times.size
            state[id] = slot
            [true, @count - before - 1, slot, wait]
          end

          def status(state, now)
            live = state.values.select { |at| at > now - @interval }
            return [@count, 0] if live.empty?

            newest = state.values.max
            [newest > now ? 0 : [0, @count - live.size].max, [0, newest + @interval - now].max]
          end

          def refund(state, id, _cost)
            state.delete(id)
          end
        end

        # GCRA: one theoretical arrival time (:t) for bucket, leaky and points.
        class Gcra
          def initialize(emission, tolerance)
            @emission = emission
            @tolerance = tolerance
          end

          def claim(state, now, cost, wait_timeout, id)
            tat = [state[:t] || now, now].max
            next_tat = tat + (cost * @emission)
            wait = [0, (next_tat - @emission - @tolerance - 0.5 - now).ceil].max
            return [false, wait] if wait > wait_timeout

            state.update(t: next_tat, id: id)
            slot = now + wait
            [true, [0, (((slot + @tolerance - next_tat) / @emission) + 1e-9).floor + 1].max, slot, wait]
          end

          def status(state, now)
            tat = [now, state[:t] || now].max
            [[0, (((now + @tolerance - tat) / @emission) + 1e-9).floor + 1].max, (tat - now).ceil]
          end

          def refund(state, id, cost)
            return unless state[:id] == id

            state[:t] -= cost * @emission
            state.delete(:id)
          end
        end
      end
    end
  end
end
