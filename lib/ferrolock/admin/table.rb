# frozen_string_literal: true

module Ferrolock
  class Admin
    # Plain-text tables for the `ferrolock` command: left-aligned columns, "—" for nothing, and
    # control characters in user data (lock names are binary-safe) shown escaped, never sent raw
    # to the terminal.
    module Table
      NONE = "—"

      module_function

      def render(headers, rows)
        cells = [headers] + rows.map { |row| row.map { |cell| text(cell) } }
        widths = headers.each_index.map { |i| cells.map { |row| row[i].to_s.length }.max }
        cells.map { |row| row.each_with_index.map { |cell, i| cell.to_s.ljust(widths[i]) }.join("  ").rstrip }
             .join("\n")
      end

      def text(value)
        case value
        when nil then NONE
        when Float then format("%.1fs", value)
        when Time then value.utc.strftime("%Y-%m-%d %H:%M:%S.%L UTC")
        else value.to_s.gsub(/[[:cntrl:]]/) { |char| format("\\x%02X", char.ord) }
        end
      end

      # "host pid=… tid=… fid=… JobClass jid=…" of a Holder (Sidekiq's log names), or nil.
      def holder(holder)
        return nil if holder.nil?

        [holder.host, "pid=#{holder.pid}", "tid=#{holder.thread}", "fid=#{holder.fiber}", holder.job_class,
         holder.jid && "jid=#{holder.jid}"].compact.join(" ")
      end

      # A LimiterInfo's limit: the stored one, or this process's own first when it differs
      # ("5 (stored 3)"; "5 (none stored)" with only waiters left); an operator's override first
      # ("2 (set live; code: 5)", "paused (5)").
      def limit(limiter)
        overridden(configured_limit(limiter), limiter.override)
      end

      # The code's limit (`configured`, as text) under the operators' LimitOverride::Override `over`
      # (nil: none): "paused (3)", "2 (set live; code: 3)".
      def overridden(configured, over)
        return configured if over.nil?

        set = over.limit ? "#{over.limit} (set live; code: #{configured})" : configured
        over.paused ? "paused (#{set})" : set
      end

      # The limit as the code has it (no override).
      def configured_limit(limiter)
        stored = limiter.limit
        local = limiter.local_limit
        return text(stored) if local.nil? || local == stored

        "#{local} (#{stored.nil? ? "none stored" : "stored #{stored}"})"
      end

      # A RateInfo's limit: "10 / 60.0s" (leaky: "+ burst 2"), or nil when this process does not
      # define the limiter (Redis keeps only its state).
      def rate(info)
        return nil if info.limit.nil?

        burst = info.burst.to_i.positive? ? " + burst #{info.burst}" : ""
        "#{info.limit} / #{text(info.interval.to_f)}#{burst}"
      end

      # A Holder's since: Redis time, or "(asked)" when it is the holder's clock at its request.
      def since(holder)
        return nil if holder&.since.nil?

        holder.since_clock == :redis ? text(holder.since) : "#{text(holder.since)} (asked)"
      end

      # The random part of a token (what tables show; the whole token is in --json and the
      # release form).
      def token(token)
        token&.split("~", 2)&.first
      end
    end
  end
end
