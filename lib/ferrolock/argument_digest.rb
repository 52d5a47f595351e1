# frozen_string_literal: true

require "digest/sha2" # now: Digest::SHA256 loaded on first use can raise in one of two threads racing to it
require "json"

module Ferrolock
  # The one rule for "the same arguments", in every feature that keys a lock on a job's arguments
  # (DualLock, Sidekiq uniqueness, ActiveJob uniqueness): the arguments as JSON with every Hash's
  # keys sorted (by their string form), recursively, so `{a: 1, b: 2}` and `{b: 2, a: 1}` are the same
  # arguments. Arrays keep their order. Keys sort as Strings, ActiveJob's own (`_aj_…`) among them
  # (DualLock's rule since it began); ActiveJob's list of a hash's symbol keys (KEY_LISTS), a set, is
  # sorted too. Each feature digests the canonical form in its own key (DualLock and Sidekiq
  # uniqueness SHA-256, ActiveJob uniqueness its digest_method).
  #
  # Sidekiq and ActiveJob uniqueness digested the arguments as given until this rule (see CHANGELOG):
  # where that differs (see ordered?: a hash out of key order, which includes every ActiveJob-serialized
  # hash, its `_aj_` entry written last) they also honour and free a lock under the older key.
  module ArgumentDigest
    KEY_LISTS = %w[_aj_symbol_keys _aj_ruby2_keywords].freeze

    module_function

    # The value with every Hash rebuilt in key order (keys as Strings).
    def canonical(value)
      case value
      when Hash then value.map { |k, v| [k.to_s, list(k, v) || canonical(v)] }.sort_by(&:first).to_h
      when Array then value.map { |v| canonical(v) }
      else value
      end
    end

    # True when canonical(value) serializes as value does (its digest is the older rule's too).
    def ordered?(value)
      case value
      when Hash
        keys = value.keys.map(&:to_s)
        keys == keys.sort && value.all? { |k, v| entry_ordered?(k, v) }
      when Array then value.all? { |v| ordered?(v) }
      else true
      end
    end

    # SHA-256 (hex) of the canonical JSON of value.
    def sha256(value)
      Digest::SHA256.hexdigest(JSON.generate(canonical(value)))
    end

    def entry_ordered?(key, value)
      sorted = list(key, value)
      sorted ? sorted == value : ordered?(value)
    end

    # ActiveJob's list of a hash's symbol keys, sorted; nil for any other entry.
    def list(key, value)
      case value
      when Array then KEY_LISTS.include?(key.to_s) ? value.sort_by(&:to_s) : nil
      end
    end
  end
end
