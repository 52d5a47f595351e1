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
        else value.to_s.gsub(/[[:cntrl:]]/) { |char| format("\\x%02X", char.ord) }
        end
      end

      # "host pid/thread" of a Holder, or nil.
      def holder(holder)
        return nil if holder.nil?

        [holder.host, [holder.pid, holder.thread].compact.join("/"), holder.job_class, holder.jid].compact.join(" ")
      end
    end
  end
end
