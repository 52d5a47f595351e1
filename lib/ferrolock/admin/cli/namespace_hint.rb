# frozen_string_literal: true

require "shellwords"
require_relative "../namespace_probe"

module Ferrolock
  class Admin
    class Cli
      # What the `ferrolock` command adds when it finds nothing: the namespace it read, the other
      # namespaces holding ferrolock's keys (NamespaceProbe) with how to read those instead, and
      # for a digest, where its running job's lock is released.
      class NamespaceHint
        def initialize(client)
          @client = client
        end

        # ` in namespace "ferrolock"`
        def in_namespace
          " in namespace #{Table.text(@client.namespace).inspect}"
        end

        # `nothing holds report:42 in namespace "ferrolock"`
        def nothing_holds(name)
          "nothing holds #{Table.text(name)}#{in_namespace}"
        end

        # A digest's force release frees its push-time lock only: where its run-time lock is released.
        def run_lock(name)
          return "" unless UniqueInfo.digest?(name.to_s)

          " (a running job's lock is released as #{Table.text(Native::Admin.unique_run(name.to_s))})"
        end

        def elsewhere?
          others.any?
        end

        # "; keys of ferrolock were found under namespace "myapp": use --namespace myapp, ...", or "".
        def elsewhere
          return "" if others.empty?

          names = others.map { |namespace| Table.text(namespace).inspect }.join(", ")
          "; keys of ferrolock were found under namespace#{"s" if others.size > 1} #{names}: use " \
            "--namespace #{Shellwords.escape(Table.text(others.first))}, #{Configuration::NAMESPACE_ENV}, " \
            "or --require with the app's configuration"
        end

        private

        def others
          @others ||= NamespaceProbe.new(@client).others
        rescue Ferrolock::Error
          @others = [] # only a hint: the answer stands without it
        end
      end
    end
  end
end
