# frozen_string_literal: true

require "spec_helper"

# The Redis layout has one owner (issue 40, item 4): each primitive reads its own keys in the core
# (ext/ferrolock-core's <primitive>/inspect.rs) and the layout listings go by is admin/layout.rs.
# Admin, the `ferrolock` command, the Web tab and ConcurrentLimiter#status only format what
# Native::Admin hands them: none of them reads a key or spells its shape.
RSpec.describe "the operators' view holds no key layout" do
  lib = File.expand_path("../lib/ferrolock", __dir__)
  files = Dir[File.join(lib, "admin{.rb,/**/*.rb}")] + Dir[File.join(lib, "web{.rb,/**/*.{rb,erb}}")] +
          [File.join(lib, "concurrent_limiter.rb")]
  # Commands that read or write a key (TIME, SCAN through Native::Admin.scan and the scripts' own calls
  # are not here).
  key_commands = /\.call\(\s*"(?:GET|PTTL|TTL|TYPE|EXISTS|ZRANGE\w*|ZSCORE|ZCOUNT|ZCARD|HGET\w*|HMGET|HLEN|
                  LLEN|LRANGE|LREM|DEL|UNLINK|SCAN|KEYS)"/x
  # A key's shape: "<ns>:{<name>}:<part>", the limiter's '{limit}' member, a line's "token|deadline".
  shapes = /:\{|\{limit\}|\}:(?:lock|slots|line|waiters|state|exec|wait|blocked|jobs|fence|override)\b/

  it "reads no key and spells no key shape (#{files.size} files)" do
    expect(files.size).to be > 30
    found = files.flat_map do |file|
      File.readlines(file).each_with_index.filter_map do |line, i|
        code = line.sub(/(?:^|\s)#.*$/, "") # comments may describe the layout
        "#{file.delete_prefix("#{lib}/")}:#{i + 1}: #{line.strip}" if code.match?(key_commands) || code.match?(shapes)
      end
    end
    expect(found).to eq([])
  end

  it "gets each kind's name prefix and key parts from the core" do
    kinds = Ferrolock::Native::Admin.kinds
    expect(kinds.keys).to include(:dist_mutex, :dual_lock, :concurrent_limiter, :limits_concurrency,
                                  :shoryuken_marker, :unique_lock, :fair_tenant, :rate_limiter)
    expect(kinds[:dist_mutex]).to eq(["", ["lock"]])
    expect(Ferrolock::Native::Admin.parse_key("ns", Ferrolock::Native::Admin.key("ns", "a:b", "slots")))
      .to eq(%w[a:b slots])
  end
end
