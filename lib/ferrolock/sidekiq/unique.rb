# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    # Enqueue-time uniqueness for Sidekiq (sidekiq-unique-jobs' options): Unique::Middleware in the
    # client and server chains, its parts loaded on first use.
    module Unique
      autoload :ClientMiddleware, File.expand_path("unique/client_middleware", __dir__)
      autoload :Digest, File.expand_path("unique/digest", __dir__)
      autoload :Leases, File.expand_path("unique/leases", __dir__)
      autoload :Lock, File.expand_path("unique/lock", __dir__)
      autoload :Middleware, File.expand_path("unique/middleware", __dir__)
      autoload :OptionNames, File.expand_path("unique/option_names", __dir__)
      autoload :OnConflict, File.expand_path("unique/on_conflict", __dir__)
      autoload :Push, File.expand_path("unique/push", __dir__)
      autoload :Resumption, File.expand_path("unique/resumption", __dir__)
      autoload :Retry, File.expand_path("unique/retry", __dir__)
      autoload :ServerMiddleware, File.expand_path("unique/server_middleware", __dir__)
      autoload :Settings, File.expand_path("unique/settings", __dir__)
      autoload :Unsupported, File.expand_path("unique/unsupported", __dir__)
    end
  end
end
