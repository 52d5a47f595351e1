# frozen_string_literal: true

require "uri"

module Ferrolock
  # Hides passwords in whatever ferrolock shows people: inspect, log lines, error messages,
  # event payloads, Web pages, the CLI. The rules live in one place, the Rust core
  # (ext/ferrolock-core/src/redact.rs), which redacts its own messages with them too: any URL
  # form (`redis://:pw@`, `redis://user:pw@`, `rediss://`, mistyped `redis//:pw@`), `?pass=` /
  # `?password=` query values, and `password: "…"` in an inspected Hash.
  module Redact
    MASK = "***"

    module_function

    # The String with every password it carries replaced by ***; also each of `secrets` (a
    # password known to the caller, plain or URL-escaped) wherever it appears.
    def text(string, secrets = [])
      shown = Native.redact(string)
      secrets.compact.reject(&:empty?).each do |secret|
        [secret, URI.encode_www_form_component(secret), URI.encode_www_form_component(secret).gsub("+", "%20")]
          .uniq.each { |form| shown = shown.gsub(form, MASK) }
      end
      shown
    end

    # A bad value for an error message about `arg`: hidden when arg names a secret, else
    # Validate.show (which redacts it).
    def value(arg, value)
      secret_arg?(arg) ? secret(value) : Validate.show(value)
    end

    # A secret value named without showing it, for an error about it ("a String of 9 bytes").
    def secret(value)
      case value
      when String then "a String of #{value.bytesize} bytes (hidden)"
      else "a #{Validate.class_of(value)} (hidden)"
      end
    end

    # True for an argument whose value is a secret (redis_password, sentinel_password,
    # redis_sentinels[0][:password]...): errors about it never show the value.
    def secret_arg?(arg)
      arg.to_s.include?("password")
    end
  end
end
