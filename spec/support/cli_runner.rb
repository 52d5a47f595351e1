# frozen_string_literal: true

require "open3"
require "rbconfig"
require_relative "processes"

module FerrolockTest
  # Runs exe/ferrolock as a real process against the test server (REDIS_URL); no Redis setting
  # or namespace of the spec's own environment leaks in. Returns [stdout, stderr, exit code].
  module CliRunner
    EXE = File.join(ROOT, "exe", "ferrolock")
    CLEARED = %w[FERROLOCK_REDIS_URL FERROLOCK_REDIS_PASSWORD FERROLOCK_NAMESPACE].to_h { |name| [name, nil] }.freeze

    def run_ferrolock(*args, env: {}, url: FerrolockTest.redis_server.url, chdir: ROOT, timeout: 60)
      env = CLEARED.merge("REDIS_URL" => url).merge(env)
      out, err, status = Timeout.timeout(timeout) do
        Open3.capture3(env, RbConfig.ruby, "-I", LIB, EXE, *args, chdir: chdir)
      end
      [out, err, status.exitstatus]
    end
  end
end
