# frozen_string_literal: true

module Ferrolock
  class Admin
    # The one way Admin's readers reach Redis: what a primitive keeps under a name, read by the
    # primitive's own core inspect (Native::Admin.state; the fields of each kind are documented on
    # its state type in ext/ferrolock-core, e.g. dist_mutex/inspect.rs), and the key layout Admin
    # lists by (Native::Admin.kinds: each kind's name prefix and key parts). The *_info.rb readers
    # only format what these return.
    module Reading
      module_function

      # A Hash of the kind's fields (Symbol keys), or nil when nothing of it is under `name`.
      def state(client, kind, name)
        Native::Admin.state(client.native, kind.to_s, name)
      end

      # What every name of `kind` starts with ("" for names of the app's choosing).
      def prefix(kind)
        layout(kind).first
      end

      # The key parts a listing finds `kind` by.
      def parts(kind)
        layout(kind).last
      end

      def layout(kind)
        (@layout ||= Native::Admin.kinds.transform_values { |v| v.map(&:freeze).freeze }.freeze).fetch(kind)
      end
    end
  end
end
