# frozen_string_literal: true

require_relative "gem_source"
require_relative "variant_choice"

module Packaging
  # The part of bin/check-precompiled-gem that asks which variant `gem install ferrolock` and Bundler take,
  # from gem sources laid out as rubygems.org serves them. checker: the CheckPrecompiled (its check, say).
  class PickCheck
    def initialize(checker, user, tmp)
      @checker = checker
      @user = user
      @tmp = tmp
    end

    # From a source holding the source gem, the gem under test and the other platforms' precompiled gems,
    # both take the gem under test (this machine's platform, this Ruby's library); with lacking (no library
    # for this Ruby) in its place, the source gem; asked for the source gem, the source gem.
    def run(source_gem, gem, lacking, other_gems)
      @source_name = File.basename(source_gem, ".gem")
      @others = other_gems.map { |path| Gem::Package.new(path).spec.platform.to_s }
      with_abi = GemSource.new(File.join(@tmp, "source-with"), [source_gem, gem.path, *other_gems]).write
      without_abi = GemSource.new(File.join(@tmp, "source-without"), [source_gem, lacking.path, *other_gems]).write
      choice = VariantChoice.new(@user, @tmp)
      %i[gem_install bundle_install].each { |tool| picks(choice, tool, [gem, with_abi], [lacking, without_abi]) }
      forced(choice, with_abi)
    end

    private

    # fitting, unfit: a precompiled gem and the source holding it.
    def picks(choice, tool, fitting, unfit)
      gem, with_abi = fitting
      lacking, without_abi = unfit
      name = tool.to_s.tr("_", " ")
      picked = choice.public_send(tool, with_abi)
      @checker.check(picked == gem.spec.full_name, "#{name} took #{picked} beside #{gem.spec.full_name}")
      fallback = choice.public_send(tool, without_abi)
      @checker.check(fallback == @source_name, "#{name} took #{fallback} beside #{@checker.describe(lacking)}")
      @checker.say "#{name} ferrolock on #{Gem::Platform.local} takes #{picked}#{not_others}; beside " \
                   "#{@checker.describe(lacking)} only, #{fallback} (the source gem)"
    end

    # The README's two ways to ask for the source gem where a precompiled one fits.
    def forced(choice, source)
      by_option = choice.gem_install(source, "--platform", "ruby")
      by_setting = choice.bundle_install(source, "BUNDLE_FORCE_RUBY_PLATFORM" => "true")
      @checker.check(by_option == @source_name, "gem install --platform ruby took #{by_option}")
      @checker.check(by_setting == @source_name, "bundle install with force_ruby_platform took #{by_setting}")
      @checker.say "gem install --platform ruby and Bundler's force_ruby_platform take #{@source_name} (the source gem)"
    end

    def not_others
      @others.empty? ? "" : " (not the #{@others.join(", ")} one)"
    end
  end
end
