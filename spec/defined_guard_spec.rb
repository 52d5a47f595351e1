# frozen_string_literal: true

require "spec_helper"

# Ruby compiles `defined?(A::B)` and `defined?(x.y)` with a hidden rescue-everything (the
# "defined guard"): an asynchronous exception (Thread#raise, Timeout, Sidekiq::Shutdown) that
# lands while it runs is swallowed, and defined? just answers nil. One in Validate.float! lost
# injected exceptions in the Shoryuken interrupt storm (spec/interrupt_atomicity_spec.rb). So
# lib/ may use such a defined? only where no asynchronous exception can land: at load time or
# under Thread.handle_interrupt(Object => :never). (`defined?(Const)` alone has no guard.)
RSpec.describe "defined? guards in lib/" do
  lib = File.expand_path("../lib", __dir__)

  # [file under lib/, method] => why no asynchronous exception can land there.
  allowed = {
    ["ferrolock.rb", "<main>"] => "load time",
    ["ferrolock/shoryuken.rb", "<main>"] => "load time",
    ["ferrolock/sidekiq/unique/retry.rb", "shutdown?"] => "runs inside the until_executed ensure's mask",
    ["ferrolock/sidekiq/unique/retry.rb", "interrupted?"] => "runs inside the until_executed ensure's mask",
    ["ferrolock/web.rb", "<main>"] => "load time"
  }

  it "are only where no asynchronous exception can land" do
    found = Dir[File.join(lib, "**", "*.rb")].flat_map do |path|
      disasm = RubyVM::InstructionSequence.compile_file(path).disasm
      disasm.scan(/defined guard in ([^@\s]+)@/).map { |(method)| [path.delete_prefix("#{lib}/"), method] }
    end
    expect(found.uniq - allowed.keys).to eq([])
  end

  it "would catch one (the check itself works)" do
    disasm = RubyVM::InstructionSequence.compile("def probe = defined?(Missing::Thing)").disasm
    expect(disasm.scan(/defined guard in ([^@\s]+)@/)).to eq([["probe"]])
  end
end
