# frozen_string_literal: true

module Ferrolock
  # A name in a reserved key space (RESERVED_PREFIXES), given by the code that owns it (the
  # uniqueness middleware's run-time locks, which are a DistMutex or a DualLock): the constructors
  # accept it (Validate.own_name!).
  class InternalName < String
    # Validate.name!, and not in a RESERVED_PREFIXES key space unless an InternalName.
    def self.check!(arg, value)
      name = Validate.name!(arg, value)
      return name if InternalName === value # rubocop:disable Style/CaseEquality -- BasicObject-safe

      prefix, owner = RESERVED_PREFIXES.find { |reserved, _| name.start_with?(reserved) }
      return name unless prefix

      raise ArgumentError, "#{arg} must not start with #{prefix.inspect}: that key space belongs to #{owner} " \
                           "(the name would share their keys), got #{Validate.show(name)}"
    end
  end
end
