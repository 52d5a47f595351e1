# frozen_string_literal: true

module Ferrolock
  # Old option names kept as aliases of the new ones (see the README's vocabulary table). An old
  # name keeps working exactly as before and logs one warning per (owner, old name) per process;
  # giving both names is an ArgumentError naming both.
  module Deprecation
    # The default of a keyword that has an old name too: tells "not given" from any value (nil included).
    UNSET = Object.new.freeze

    @warned = {}
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

        Ferrolock.logger.warn("ferrolock: #{owner}: #{old} is deprecated, use #{new} (same meaning)")
      end

      # Keeps a namespace's renamed constants working: `namespace::Old` answers the constant named
      # renamed[:Old] (a String, resolved on use so nothing loads early), warning once. The old names
      # are not constants (const_missing answers them), so each name has one file (spec/constant_paths_spec.rb).
      def renamed_constants(namespace, renamed)
        renamed = renamed.dup.freeze
        namespace.define_singleton_method(:const_missing) do |name|
          new_name = renamed[name] or return super(name)

          Deprecation.warn_once(self.name, name, new_name)
          Object.const_get(new_name)
        end
      end

      # Forgets which warnings were logged (for tests).
      def reset!
        @lock.synchronize { @warned.clear }
      end
    end
  end
end
