# frozen_string_literal: true

# magnus looks up a wrapped type's Ruby class lazily, inside a OnceLock, on its first wrap/unwrap;
# a thread switch during that lookup deadlocked the process (a second thread blocks on the
# OnceLock holding the GVL). The extension resolves every class at require instead
# (ruby_api::resolve_wrapped_classes). Both checks run in a fresh process: in this one, earlier
# examples have already resolved most classes.
RSpec.describe "native classes wrapping Rust data" do
  include FerrolockTest::Processes

  # Every `#[magnus::wrap(class = "...")]` in the extension's source.
  let(:wrapped) do
    Dir[File.join(FerrolockTest::ROOT, "ext/ferrolock/src/**/*.rs")].flat_map do |path|
      File.read(path).scan(/#\[magnus::wrap\(class = "([\w:]+)"/).flatten
    end.sort
  end

  it "are all resolved when ferrolock is required (the lookup undefines .allocate)" do
    expect(wrapped.size).to be >= 12
    code = <<~RUBY
      require "ferrolock"
      #{wrapped.inspect}.each do |name|
        Object.const_get(name).allocate
        puts "lazy: \#{name}"
      rescue TypeError
        nil
      end
    RUBY
    expect(run_ruby!(code)).to eq(""), "classes still resolved lazily (add them to " \
                                       "ruby_api::resolve_wrapped_classes)"
  end

  it "can be used first by two threads at once without a deadlock" do
    # A const_get that sleeps forces the thread switch that once had to be lucky.
    code = <<~RUBY
      require "ferrolock"
      Object.singleton_class.prepend(Module.new do
        def const_get(name, *rest)
          sleep 0.2 if name.to_s.start_with?("Ferrolock::Native::")
          super
        end
      end)
      threads = Array.new(2) { Thread.new { Ferrolock::Native::FairTenantRules.new([1], [1.0]).size } }
      puts threads.map(&:value).inspect
    RUBY
    expect(run_ruby!(code, timeout: 60)).to eq("[1, 1]\n")
  end
end
