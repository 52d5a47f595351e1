# frozen_string_literal: true

require "uri"

module Ferrolock
  class Admin
    class Cli
      # The `ferrolock` command's Redis password, kept off its command line (where `ps` shows it):
      # --password-file FILE, else FERROLOCK_REDIS_PASSWORD, else whatever the URL carries. It is
      # put into the URL the client is built from (a unix socket's as ?pass=).
      module Password
        ENV_VAR = "FERROLOCK_REDIS_PASSWORD"

        module_function

        # The password from the file (its last line break dropped) or the environment, or nil.
        def read(file, env)
          return File.read(file).chomp if file

          value = env[ENV_VAR]
          value.nil? || value.empty? ? nil : value
        rescue SystemCallError => e
          raise ArgumentError, "--password-file #{Table.text(file)}: #{e.class.name.split("::").last}"
        end

        # `url` with `password` in place of its own (nil: unchanged).
        def url_with(url, password)
          return url if password.nil? || !(String === url) # rubocop:disable Style/CaseEquality -- BasicObject-safe
          return unix_url_with(url, password) if url.start_with?("unix://", "redis+unix://")

          parts = url.match(%r{\A(?<scheme>rediss?://)(?:(?<userinfo>.*)@)?(?<rest>[^@]*)\z}m)
          return url unless parts # not a URL the client takes: Client.new says so

          user = parts[:userinfo]&.split(":", 2)&.first
          "#{parts[:scheme]}#{user}:#{escape(password)}@#{parts[:rest]}"
        end

        # A unix socket's password goes in its query, as pass=.
        def unix_url_with(url, password)
          base, query = url.split("?", 2)
          pairs = (query || "").split("&").reject { |pair| pair.start_with?("pass=") }
          "#{base}?#{(pairs + ["pass=#{escape(password)}"]).join("&")}"
        end

        # Passwords the URL carries (decoded), to hide wherever a message repeats them.
        def secrets_in(url)
          uri = URI.parse(url.to_s)
          from_query = URI.decode_www_form(uri.query || "").filter_map { |key, value| value if key.include?("pass") }
          [uri.password && URI.decode_www_form_component(uri.password), *from_query].compact.reject(&:empty?)
        rescue URI::Error, ArgumentError
          []
        end

        def escape(text)
          URI.encode_www_form_component(text).gsub("+", "%20")
        end
      end
    end
  end
end
