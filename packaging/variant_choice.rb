# frozen_string_literal: true

require "fileutils"

module Packaging
  # Which variant of ferrolock `gem install` and `bundle install` take from a gem source, on the Ruby
  # running this, as the given user shell.
  class VariantChoice
    def initialize(user, dir)
      @user = user
      @dir = dir
    end

    # The full name `gem install ferrolock` (with options) would install (--explain installs nothing).
    def gem_install(source, *options)
      empty = FileUtils.mkdir_p(File.join(@dir, "empty")).first # gem install also looks in the current dir
      output, ok = @user.run("gem", "install", "--explain", "--clear-sources", "--source", source.url, *options,
                             "ferrolock",
                             chdir: empty)
      ok ? output[/^ +(ferrolock-\S+)/, 1] : output
    end

    # The gem `bundle install` of an app with `gem "ferrolock"` unpacked. Where it picks the source gem,
    # the build fails at once (no cargo on the user's PATH): the unpacked gem still shows the pick.
    # settings: Bundler's, e.g. { "BUNDLE_FORCE_RUBY_PLATFORM" => "true" }.
    def bundle_install(source, settings = {})
      app = File.join(@dir, "app-#{File.basename(source.dir)}#{"-#{settings.size}" if settings.any?}")
      FileUtils.mkdir_p(app)
      File.write(File.join(app, "Gemfile"), %(source "#{source.url}"\ngem "ferrolock"\n))
      output, = @user.run("bundle", "install", chdir: app,
                                               env: { "BUNDLE_PATH" => File.join(app, "vendor"),
                                                      "BUNDLE_SILENCE_ROOT_WARNING" => "1", **settings })
      unpacked = Dir[File.join(app, "vendor", "ruby", "*", "gems", "ferrolock-*")]
      unpacked.size == 1 ? File.basename(unpacked.first) : output
    end
  end
end
