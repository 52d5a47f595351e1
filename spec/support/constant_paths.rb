# frozen_string_literal: true

module FerrolockTest
  # Zeitwerk's rule for lib/ferrolock, checked without Zeitwerk (ferrolock does not autoload through
  # it): a file's path names a constant (lib/ferrolock/sidekiq/unique/on_conflict.rb names
  # Ferrolock::Sidekiq::Unique::OnConflict) which the file defines, and every constant is defined in
  # the file its name gives, or inside the file of the namespace holding it (Ferrolock::Admin::Cli::Exit
  # in admin/cli.rb). A file may also reopen the namespaces around its constant.
  module ConstantPaths
    LIB = File.expand_path("../../lib", __dir__)
    # Files that name no constant: require entry points, each doing one thing when required.
    ENTRY_POINTS = {
      "ferrolock/native_library.rb" => "loads the compiled library, which defines Ferrolock::Native",
      "ferrolock/testing/rspec.rb" => "`require \"ferrolock/testing/rspec\"` configures RSpec"
    }.freeze
    # Files not yet laid out so (issue 40, item 6 left them), each with why; the spec fails once one
    # of them is fixed, so that it leaves this list.
    NOT_YET = {}.freeze
    # Zeitwerk's inflections for a gem: version.rb holds VERSION, configuration/fair_tenant_modes.rb the
    # deprecated Configuration::FAIR_TENANT_MODES.
    INFLECTIONS = { "rspec" => "RSpec", "version" => "VERSION", "fair_tenant_modes" => "FAIR_TENANT_MODES" }.freeze

    module_function

    # lib/ferrolock's Ruby files (the compiled libraries beside them are not Ruby).
    def files
      Dir[File.join(LIB, "ferrolock", "**", "*.rb")].map { |f| f.delete_prefix("#{LIB}/") }.sort - ENTRY_POINTS.keys
    end

    # "ferrolock/sidekiq/unique/on_conflict.rb" => "Ferrolock::Sidekiq::Unique::OnConflict"
    def constant_for(file)
      file.delete_suffix(".rb").split("/").map do |part|
        INFLECTIONS.fetch(part) { part.split("_").map(&:capitalize).join }
      end.join("::")
    end

    # The constants a file defines (class, module, assignment), by full name, read from its syntax tree.
    def defined_in(file)
      found = []
      walk(RubyVM::AbstractSyntaxTree.parse_file(File.join(LIB, file)), [], found)
      found.uniq
    end

    def walk(node, nesting, found)
      return unless node.is_a?(RubyVM::AbstractSyntaxTree::Node)

      case node.type
      when :CLASS, :MODULE
        name = qualified(node.children[0], nesting)
        found << name
        node.children[1..].each { |child| walk(child, name.split("::"), found) }
      when :CDECL
        target = node.children[0]
        found << (target.is_a?(Symbol) ? [*nesting, target].join("::") : qualified(target, nesting))
        node.children[1..].each { |child| walk(child, nesting, found) }
      when :SCLASS then nil # class << self holds methods, not constants
      else node.children.each { |child| walk(child, nesting, found) }
      end
    end

    # A class or module keyword's path (Foo, Foo::Bar, ::Foo) under the lexical nesting.
    def qualified(cpath, nesting)
      case cpath.type
      when :COLON3 then cpath.children[0].to_s
      when :CONST then [*nesting, cpath.children[0]].join("::")
      when :COLON2
        scope, name = cpath.children
        scope.nil? ? [*nesting, name].join("::") : "#{qualified(scope, nesting)}::#{name}"
      end
    end

    # True when a file naming `owner` may define `name`: it is the owner, a namespace around it, or
    # inside it.
    def placed?(name, owner)
      name == owner || owner.start_with?("#{name}::") || name.start_with?("#{owner}::")
    end

    # "file: defines X, which its path does not give" lines, and "file: does not define X" lines.
    def static_problems
      files.flat_map do |file|
        owner = constant_for(file)
        defined = defined_in(file).select { |name| name == "Ferrolock" || name.start_with?("Ferrolock::") }
        missing = defined.include?(owner) ? [] : ["#{file}: does not define #{owner}, the constant its path names"]
        missing + (defined.reject { |name| placed?(name, owner) }).map do |name|
          "#{file}: defines #{name}, whose name gives another file"
        end
      end
    end

    # The same from the loaded program: each constant under Ferrolock (walked by name, aliases and the
    # compiled Ferrolock::Native excepted) where Module#const_source_location says it was defined.
    def loaded_problems(root = Ferrolock, seen = {})
      root.constants(false).sort.flat_map do |c|
        name = "#{root.name}::#{c}"
        next [] if seen[name] || name == "Ferrolock::Native"

        seen[name] = true
        path, = root.const_source_location(c)
        value = root.const_get(c, false)
        problems = []
        if path.is_a?(String) && path.start_with?("#{LIB}/ferrolock")
          file = path.delete_prefix("#{LIB}/")
          problems << "#{file}: defines #{name}, whose name gives another file" unless placed?(name, constant_for(file))
        end
        problems + (value.is_a?(Module) && value.name == name ? loaded_problems(value, seen) : [])
      end
    end
  end
end
