# frozen_string_literal: true

require "open3"
require "rbconfig"

# An Integer command argument is sent as its digits without calling a Ruby method. magnus's
# Integer formatting calls Integer#to_s under rb_protect: an exception pending for the thread
# (Thread#raise, Timeout) landed in that call, was swallowed, and "#<Integer:0x…>" went to Redis
# ("PX 5000" answered "value is not an integer or out of range"). bin/chaos --gc found it under
# its Thread#raise storm; here Integer#to_s raises every time, in a process of its own.
RSpec.describe "Integer command arguments" do
  it "are sent as their digits, even when Integer#to_s raises" do
    script = <<~RUBY
      require "ferrolock"
      client = Ferrolock::Client.new(url: ENV.fetch("REDIS_URL"))
      class Integer
        def to_s(*)
          raise "Integer#to_s was called"
        end
      end
      print client.call("ECHO", 5000), " ", client.call("ECHO", -7), " ", client.call("ECHO", 2**70)
    RUBY
    out, err, status = Open3.capture3({ "REDIS_URL" => FerrolockTest.redis_server.url },
                                      RbConfig.ruby, "-I", File.expand_path("../lib", __dir__), "-e", script)
    expect(status).to be_success, err
    expect(out).to eq("5000 -7 1180591620717411303424")
  end
end
