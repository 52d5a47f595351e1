# frozen_string_literal: true

require_relative "after_work/subjects"
require_relative "after_work/fork_case"
require_relative "after_work/release_case"

module Chaos
  # bin/chaos's cases at the seams (issue 24), run after the load session on the same Redis: a fork
  # inside a held block, and Redis failing right after a block's work was done. Each case checks
  # its own promises; prints one line per case and returns the failures.
  module AfterWork
    module_function

    # short: each primitive with one fault kind and one way for the child to leave (about 10 s).
    def run(redis, short:)
      # The WARN lines of the failed releases are expected here; each case checks the outcome itself.
      Ferrolock.configure { |config| config.logger = Logger.new(File::NULL) }
      client = Ferrolock::Client.new(url: redis.url, namespace: "chaos-after",
                                     connect_timeout: Settings::CONNECT_TIMEOUT, read_timeout: Settings::READ_TIMEOUT)
      puts "\nafter-work cases:"
      cases(client, redis, short).flat_map do |one|
        violations = one.run
        puts format("  %-55<name>s %<result>s", name: one.name,
                                                result: violations.empty? ? "ok" : violations.join("; "))
        violations.map { |v| "#{one.name}: #{v}" }
      end
    end

    def cases(client, redis, short)
      Subjects::ALL.each_with_index.flat_map do |subject, i|
        leaves = short ? [ForkCase::LEAVES[i % ForkCase::LEAVES.size]] : ForkCase::LEAVES
        faults = short ? [ReleaseCase::FAULTS[i % ReleaseCase::FAULTS.size]] : ReleaseCase::FAULTS
        leaves.map { |leave| ForkCase.new(client, subject, leave) } +
          faults.map { |fault| ReleaseCase.new(client, subject, fault, redis: redis) }
      end
    end
  end
end
