# frozen_string_literal: true

module Ferrolock
  # Old option names kept as aliases of the new ones (see the README's vocabulary table). An old
  # name keeps working exactly as before and logs one warning per (owner, old name) per process;
  # giving both names is an ArgumentError naming both.
  module Deprecation
    # The default of a keyword that has an old name too: tells "not given" from any value (nil included).
    UNSET = Object.new.freeze

    # Where a constant's file is found from its name (see renamed_constants).
    LIB = File.expand_path("..", __dir__)
    private_constant :LIB
    @warned = {}
    @renamed = {}.freeze
    @lock = Mutex.new

    class << self
      # [the name given, its value]: the new name's, or (warning once) the old one's; the new name
      # and default when neither was given (errors then name what the caller wrote). owner: what
      # takes the option, as users write it ("Ferrolock::DualLock.new"); values: [the old name's
      # value, the new name's], each UNSET when not given.
      def rename(owner, old, new, values, default)
        old_value, new_value = values
        old_given = !UNSET.equal?(old_value)
        new_given = !UNSET.equal?(new_value)
        raise ArgumentError, "#{owner}: give #{new}: or its deprecated name #{old}:, not both" if old_given && new_given
        return [new, new_given ? new_value : default] unless old_given

        warn_once(owner, old, new)
        [old, old_value]
      end

      # Logs "old is deprecated, use new" the first time owner meets old in this process.
      def warn_once(owner, old, new)
        first = @lock.synchronize { @warned[[owner, old]] ? false : (@warned[[owner, old]] = true) }
        return unless first

        Ferrolock.log(:warn, "ferrolock: #{owner}: #{old} is deprecated, use #{new} (same meaning)")
      end

      # Keeps a namespace's renamed constants working: `namespace::Old` is autoloaded from the file
      # its name gives (Ferrolock::Sidekiq::UniqueLock from lib/ferrolock/sidekiq/unique_lock.rb),
      # which sets it to the constant renamed[:Old] names (a String) through `renamed`, warning once.
      # So nothing loads before an old name is used, and `defined?(namespace::Old)` is truthful.
      def renamed_constants(namespace, renamed)
        renamed.each do |old, new|
          full = "#{namespace.name}::#{old}"
          @lock.synchronize { @renamed = @renamed.merge(full => new).freeze }
          namespace.autoload(old, File.join(LIB, *full.split("::").map { |part| file_name(part) }))
        end
      end

      # The constant `namespace::old` now names, warning once (each old name's file calls it).
      def renamed(namespace, old)
        new = @renamed.fetch("#{namespace.name}::#{old}")
        warn_once(namespace.name, old, new)
        Object.const_get(new)
      end

      # Every deprecated constant name => the name it stands for.
      def renamed_names
        @renamed
      end

      # "UniqueLock" => "unique_lock", "FAIR_TENANT_MODES" => "fair_tenant_modes" (Zeitwerk's rule).
      def file_name(constant)
        constant.gsub(/([a-z\d])([A-Z])/, '\\1_\\2').downcase
      end
      private :file_name

      # Forgets which warnings were logged (for tests).
      def reset!
        @lock.synchronize { @warned.clear }
      end
    end
  end
end
