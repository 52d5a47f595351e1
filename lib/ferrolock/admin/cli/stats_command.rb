# frozen_string_literal: true

module Ferrolock
  class Admin
    class Cli
      # `ferrolock stats NAME [--since 1h] [--json]`: Admin#stats as a table or JSON; exit 1 when
      # NAME has no history in that time.
      module StatsCommand
        private

        def run_stats(name)
          since = @options[:since]
          stats = admin.stats(name, since: since)
          if stats[:primitives].empty?
            raise Cli::Exit.new(Cli::NOT_FOUND, "ferrolock: no history of #{Table.text(name)}#{hint.in_namespace} in " \
                                                "the last #{since} (is history on in the app?)#{hint.elsewhere}")
          end

          output.stats(stats)
          Cli::OK
        end
      end
    end
  end
end
