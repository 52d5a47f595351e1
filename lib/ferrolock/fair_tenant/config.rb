# frozen_string_literal: true

module Ferrolock
  # FairTenant's global setting, kept in its own file so the shared Configuration stays small:
  #
  #   Ferrolock.configure { |c| c.fair_tenant_mode = :bounded }
  class Configuration
    FAIR_TENANT_MODES = %i[exact bounded].freeze

    # :exact (default): a sorted set of jids per (job class, tenant), exact counts.
    # :bounded: sliding-window counters, a small fixed size per tenant, estimated counts.
    def fair_tenant_mode
      @fair_tenant_mode || :exact
    end

    def fair_tenant_mode=(value)
      @fair_tenant_mode = self.class.fair_tenant_mode!(:fair_tenant_mode, value)
    end

    # A mode given as a Symbol or String (sidekiq_options survive JSON as Strings). Compared, not
    # converted with to_sym (which raises EncodingError on invalid UTF-8).
    def self.fair_tenant_mode!(arg, value)
      mode = case value
             when Symbol then value
             when String then FAIR_TENANT_MODES.find { |known| known.name == value }
             else raise TypeError, "#{arg} must be :exact or :bounded, got #{Validate.show(value)}"
             end
      return mode if FAIR_TENANT_MODES.include?(mode)

      raise ArgumentError, "#{arg} must be :exact or :bounded, got #{Validate.show(value)}"
    end
  end
end
