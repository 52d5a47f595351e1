# frozen_string_literal: true

require_relative "support/testing_scenarios" # (ferrolock/testing, its factory left off for other files)

# Under Ferrolock::Testing a primitive's native object is a Switch that forwards each call to the
# backend of the mode in force: every method the Ruby layer may call on a Native class must exist
# on its fake and its disabled stand-in, taking the same arguments (a missing one is a
# NoMethodError in the user's test suite, found only by the path that calls it).
module FerrolockTest
  module StandIns
    # The Native classes lib/ builds through Backend.build (each needs a fake and a disabled one).
    KINDS = Dir[File.expand_path("../lib/**/*.rb", __dir__)].flat_map do |file|
      File.read(file).scan(/Backend\.build\(:(\w+)/).flatten
    end.uniq.sort.map(&:to_sym).freeze

    # What each stand-in has beyond its native class, and why (anything else is a stale method).
    EXTRA = {
      JobConcurrency: %i[lost?] # Testing::JobSlot#lost? asks its backend
    }.freeze
  end
end

RSpec.describe "Ferrolock::Testing's stand-ins have the native classes' methods" do
  native = Ferrolock::Native
  testing = Ferrolock::Testing

  # Whether a method with these parameters takes `count` positional arguments and no keyword.
  def takes?(parameters, count)
    kinds = parameters.map(&:first)
    required = kinds.count(:req)
    optional = kinds.count(:opt)
    return false if kinds.include?(:keyreq)

    count >= required && (kinds.include?(:rest) || count <= required + optional)
  end

  # "name/arity" for each public method of a native class.
  def native_methods(klass)
    klass.public_instance_methods(false).to_h { |name| [name, klass.instance_method(name).arity] }
  end

  # The methods of stand_in (a class) that do not take the native arities.
  def mismatches(stand_in, arities)
    arities.filter_map do |name, arity|
      next "#{name} (missing)" unless stand_in.public_method_defined?(name)

      parameters = stand_in.instance_method(name).parameters
      "#{name}(#{arity} args; it takes #{parameters.inspect})" unless arity.negative? || takes?(parameters, arity)
    end
  end

  FerrolockTest::StandIns::KINDS.each do |kind|
    { fake: testing::Fake, disabled: testing::Disabled }.each do |mode, mod|
      it "#{mode}: #{kind} has every public method of Native::#{kind}, with its arguments" do
        native_class = native.const_get(kind, false)
        stand_in = mod.const_get(kind, false)
        expect(mismatches(stand_in, native_methods(native_class))).to eq([])
        extra = stand_in.public_instance_methods(false) - native_class.public_instance_methods(false)
        expect(extra - FerrolockTest::StandIns::EXTRA.fetch(kind, [])).to eq([])
      end

      it "#{mode}: #{kind}.new takes Native::#{kind}.new's arguments (after the store in fake mode)" do
        arity = native.const_get(kind, false).method(:new).arity
        leading = mode == :fake ? 1 : 0 # Switch passes the store first
        expect(takes?(mod.const_get(kind, false).instance_method(:initialize).parameters, arity + leading)).to be(true)
      end
    end
  end

  Ferrolock::Testing::Switch::NATIVE_TOKENS.each do |native_token|
    name = native_token.name.split("::").last
    it "Testing::#{name} has every public method of Native::#{name}" do
      expect(mismatches(testing.const_get(name, false), native_methods(native_token))).to eq([])
    end
  end

  it "Fake::FairTenant.check takes Native::FairTenant.check's arguments after the store" do
    arity = native::FairTenant.method(:check).arity
    expect(takes?(testing::Fake::FairTenant.method(:check).parameters, arity + 1)).to be(true)
  end

  it "finds the eight kinds lib/ builds" do
    expect(FerrolockTest::StandIns::KINDS).to include(:DistMutex, :KeyLock, :JobConcurrency)
    expect(FerrolockTest::StandIns::KINDS.size).to eq(8)
  end
end
