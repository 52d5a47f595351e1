# frozen_string_literal: true

module Ferrolock
  class Admin
    class Cli
      # `ferrolock limit NAME N` (or `--clear`), `ferrolock pause NAME`, `ferrolock resume NAME`: a
      # ConcurrentLimiter's limit changed live (Admin#set_limit, #clear_override, #pause, #resume),
      # or with --concurrency a limits_concurrency key's; `pause|resume --queue QUEUE` a Shoryuken queue's lock.
      # Prints the override now in force (a table line, or JSON).
      module LimitCommands
        private

        def run_limit(name, limit = nil)
          return print_override(name, admin.clear_override(name, kind: kind)) if @options[:clear]

          usage!("limit: give N (a positive integer) or --clear") if limit.nil?
          usage!("limit: N must be a positive integer, got #{Table.text(limit)}") unless limit.match?(/\A\d+\z/)

          print_override(name, admin.set_limit(name, Integer(limit, 10), kind: kind))
        end

        def run_pause(name)
          print_override(name, admin.pause(name, kind: kind))
        end

        def run_resume(name)
          print_override(name, admin.resume(name, kind: kind))
        end

        def kind
          usage!("give --concurrency or --queue, not both") if @options[:concurrency] && @options[:queue]
          return :shoryuken_lock if @options[:queue]

          @options[:concurrency] ? :limits_concurrency : :concurrent_limiter
        end

        def print_override(name, override)
          kind == :shoryuken_lock ? output.queue_pause(name, override) : output.override(name, override)
          Cli::OK
        end
      end
    end
  end
end
