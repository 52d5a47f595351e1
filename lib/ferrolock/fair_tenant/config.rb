# frozen_string_literal: true

module Ferrolock
  # FairTenant's global setting, kept in its own file so the shared Configuration stays small:
  #
  #   Ferrolock.configure { |c| c.fair_tenant_mode = :bounded }
  module FairTenant
    # Configuration includes this module.
    module Config
      MODES = %i[exact bounded].freeze

      # A mode given as a Symbol or String (sidekiq_options survive JSON as Strings). Compared, not
      # converted with to_sym (which raises EncodingError on invalid UTF-8).
      def self.mode!(arg, value)
        mode = OptionCheck.symbol_in(value, MODES)
        return mode if mode

        message = "#{arg} must be :exact or :bounded, got #{Validate.show(value)}"
        case value
        when Symbol, String then raise ArgumentError, message
        else raise TypeError, message
        end
      end

      # :exact (default): a sorted set of jids per (job class, tenant), exact counts.
      # :bounded: sliding-window counters, a small fixed size per tenant, estimated counts.
      def fair_tenant_mode
        @fair_tenant_mode || :exact
      end

      def fair_tenant_mode=(value)
        @fair_tenant_mode = Config.mode!(:fair_tenant_mode, value)
      end
    end
  end
end
