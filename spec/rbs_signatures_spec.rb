# frozen_string_literal: true

require "json"
require "open3"

# sig/ (ferrolock.rbs, ferrolock/testing.rbs) held against the loaded code, which `rbs validate` cannot
# do: every method a Ferrolock class or module really has in public is declared, and every declared
# method and constant exists (in any visibility). The rbs gem is not in the bundle (bin/test runs it outside
# Bundler), so a child Ruby outside Bundler parses the signatures with it and prints them as JSON.
module FerrolockTest
  # Child-process scripts of spec/rbs_signatures_spec.rb.
  module RbsCheck
    # Parses every signature file under sig/ (ARGV[0]) with the rbs gem; prints their classes' methods and constants.
    PARSE_SIG = <<~'RUBY'
      require "rbs"
      require "json"
      M = RBS::AST::Members
      D = RBS::AST::Declarations
      table = Hash.new { |h, k| h[k] = { "methods" => [], "constants" => [] } }
      key = ->(name, kind) { "#{kind == :singleton ? "." : "#"}#{name}" }
      walk = lambda do |decl, outer|
        next unless decl.is_a?(D::Class) || decl.is_a?(D::Module)

        name = [outer, decl.name.to_s.delete_prefix("::")].compact.join("::")
        entry = table[name]
        decl.members.each do |m|
          case m
          when D::Class, D::Module then walk.call(m, name)
          when D::Constant then entry["constants"] << m.name.to_s
          when M::MethodDefinition
            kinds = m.kind == :singleton_instance ? %i[instance singleton] : [m.kind]
            kinds.each { |kind| entry["methods"] << key.call(m.name, kind) }
          when M::Alias then entry["methods"] << key.call(m.new_name, m.kind)
          when M::AttrReader then entry["methods"] << key.call(m.name, m.kind)
          when M::AttrWriter then entry["methods"] << key.call("#{m.name}=", m.kind)
          when M::AttrAccessor then entry["methods"] << key.call(m.name, m.kind) << key.call("#{m.name}=", m.kind)
          end
        end
      end
      Dir[File.join(ARGV[0], "**", "*.rbs")].sort.each do |file|
        parsed = RBS::Parser.parse_signature(File.read(file))
        # rbs 3 answers [buffer, directives, declarations]; rbs 2 the declarations alone.
        decls = parsed.last.is_a?(Array) ? parsed.last : parsed
        decls.each { |decl| walk.call(decl, nil) }
      end
      print JSON.generate(table)
    RUBY

    # What a fresh `require "ferrolock"` and its testing mode define (no spec's stand-ins): for every
    # Ferrolock class and module, autoloaded ones included, its own public methods, every method it answers (any
    # visibility, inherited too) and its constants. "#name" is an instance method, ".name" a class method.
    RUNTIME = <<~'RUBY'
      require "ferrolock"
      require "ferrolock/testing"
      require "ferrolock/testing/minitest"
      require "ferrolock/active_job/uniqueness"
      require "json"
      # The class methods Struct.new defines on every struct class (RBS: `class X < Struct[…]`).
      struct_class_methods = %w[.[] .members .keyword_init? .inspect .new]
      keys = ->(prefix, names) { names.map { |name| "#{prefix}#{name}" } }
      table = {}
      walk = lambda do |mod|
        next if table.key?(mod.name)

        single = mod.singleton_class
        own = keys.call("#", mod.public_instance_methods(false)) + keys.call(".", single.public_instance_methods(false))
        own -= struct_class_methods if mod.is_a?(Class) && mod < Struct
        all = keys.call("#", mod.instance_methods + mod.private_instance_methods) +
              keys.call(".", single.instance_methods + single.private_instance_methods)
        table[mod.name] = { "public" => own, "all" => all, "constants" => mod.constants(false).map(&:to_s) }
        mod.constants(false).each do |const|
          # A deprecated name's file loads (and warns) only when used; it names a constant walked anyway.
          next if Ferrolock::Deprecation.renamed_names.key?("#{mod.name}::#{const}")

          value = mod.const_get(const, false)
          walk.call(value) if value.is_a?(Module) && value.name&.start_with?("#{mod.name}::")
        end
      end
      walk.call(Ferrolock)
      print JSON.generate(table)
    RUBY
  end
end

RSpec.describe "sig/ferrolock.rbs" do
  # { "Ferrolock::Client" => { "methods" => ["#call", ".new", …], "constants" => ["OPTIONS"] } }
  def self.declarations
    @declarations ||= begin
      sig = File.join(FerrolockTest::ROOT, "sig")
      # (BUNDLER_SETUP: RubyGems 3.5+, Ruby 3.3's, sets Bundler up again in a child that has it.)
      outside_bundler = %w[RUBYOPT RUBYLIB BUNDLE_GEMFILE BUNDLE_BIN_PATH BUNDLER_SETUP].to_h { |name| [name, nil] }
      out, err, status = Open3.capture3(outside_bundler, RbConfig.ruby, "-e", FerrolockTest::RbsCheck::PARSE_SIG, sig)
      raise "parsing #{sig} failed:\n#{err}" unless status.success?

      JSON.parse(out)
    end
  end

  # RUNTIME's table, from a child process.
  def self.runtime(spec)
    @runtime ||= JSON.parse(spec.run_ruby!(FerrolockTest::RbsCheck::RUNTIME))
  end

  it "declares every public method of every Ferrolock class and module" do
    declared = self.class.declarations
    missing = self.class.runtime(self).flat_map do |name, mod|
      (mod["public"] - declared.fetch(name, {}).fetch("methods", [])).map { |key| "#{name}#{key}" }
    end
    expect(missing.sort).to eq([]), "public but not in sig/ferrolock.rbs:\n  #{missing.sort.join("\n  ")}"
  end

  it "declares only methods and constants that exist" do
    runtime = self.class.runtime(self)
    phantoms = self.class.declarations.flat_map do |name, entry|
      mod = runtime[name]
      next ["#{name} (no such class or module)"] unless mod

      (entry["methods"] - mod["all"]).map { |key| "#{name}#{key}" } +
        (entry["constants"] - mod["constants"]).map { |const| "#{name}::#{const}" }
    end
    expect(phantoms.sort).to eq([]), "in sig/ferrolock.rbs but not in the code:\n  #{phantoms.sort.join("\n  ")}"
  end
end
