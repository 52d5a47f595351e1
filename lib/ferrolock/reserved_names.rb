# frozen_string_literal: true

module Ferrolock
  # Name prefixes of ferrolock's own key spaces. A DistMutex, DualLock or ConcurrentLimiter
  # named `unique:<Class>:<digest>` would share the key of a Sidekiq uniqueness lock (and
  # `…:run` its run-time lock), so an application's names may not start with them.
  RESERVED_PREFIXES = { "unique:" => "the Sidekiq uniqueness locks" }.freeze

  # A name in a reserved key space, given by the code that owns it (the uniqueness middleware's
  # run-time locks, which are a DistMutex or a DualLock): the constructors accept it.
  class InternalName < String; end

  # Argument checks (lib/ferrolock/validate.rb); this one guards the reserved key spaces.
  module Validate
    # Validate.name!, and not in a RESERVED_PREFIXES key space unless an InternalName.
    def self.own_name!(arg, value)
      name = name!(arg, value)
      return name if InternalName === value # rubocop:disable Style/CaseEquality -- BasicObject-safe

      prefix, owner = RESERVED_PREFIXES.find { |reserved, _| name.start_with?(reserved) }
      return name unless prefix

      raise ArgumentError, "#{arg} must not start with #{prefix.inspect}: that key space belongs to #{owner} " \
                           "(the name would share their keys), got #{show(name)}"
    end
  end
end
