# frozen_string_literal: true

require "set"

module FerrolockTest
  # The file paths that the docs and the code's comments name, and the Markdown links between docs:
  # a path that names no file (moved, renamed, removed) misleads whoever follows it.
  module DocPaths
    ROOT = File.expand_path("..", __dir__)
    # Where a path a comment names may start: the repository, the crates, their src/, lib/ferrolock/
    # (Ruby comments name its files from there) and spec/ (spec/support/…); and the file's folder.
    BASES = ["", "ext/ferrolock-core/", "ext/ferrolock-core/src/", "ext/ferrolock-core/lua/", "ext/ferrolock/",
             "ext/ferrolock/src/", "lib/", "lib/ferrolock/", "spec/", "sig/"].freeze
    # Paths of other projects: an app's (config/…, bin/rails), ruby/spec's (core/…), Sidekiq's
    # (web/views/…), examples (foo/…), and the libraries a build puts in lib/ferrolock/3.x.
    ELSEWHERE = %r{\A(?:config/|core/|web/views/|foo/|bin/(?:rails|sidekiq|shoryuken)\z|lib/ferrolock/3\.\d)}
    # A path: folders and a file with an extension we keep, or one of the repository's top folders.
    EXTENSIONS = "rb|rs|lua|md|toml|yml|yaml|sh|gemspec|gemfile|rbs|txt|json|erb|css|js|html"
    TOP = "lib|ext|spec|bin|doc|demo|bench|chaos|sig|gemfiles|packaging|exe"
    PATH = %r{
      (?<![\w./~$@-])                                        # not inside a longer path, URL or variable
      (?<path>(?=[\w\{])
        (?:[\w.-]+/|\{[\w,.]+\}/)+(?:[\w.-]*\{[\w,.-]+\}[\w.-]*|[\w.-]+)\.(?:#{EXTENSIONS}) # dir/…/file.ext
        |(?:#{TOP})/(?:[\w.-]+/)*[\w.-]*                      # lib/…, spec/…/ (a file or a folder)
      )
      (?![\w/*<\{-])                                          # not a glob or a placeholder's start
    }x

    module_function

    def files
      Dir.chdir(ROOT) do
        docs = ["README.md", *Dir["doc/*.md"]]
        code = Dir["{lib,spec,bench,chaos,demo}/**/*.rb"] + Dir["ext/**/*.{rs,lua}"] + Dir["bin/*"]
        code.reject! { |f| f.start_with?("ext/target", "spec/fixtures", "spec/doc_paths") || File.directory?(f) }
        docs.to_h { |f| [f, :doc] }.merge(code.to_h { |f| [f, :code] })
      end
    end

    # The text of file that may name paths: a doc whole, a program's comments.
    def text(file, kind)
      source = File.read(File.join(ROOT, file))
      return source if kind == :doc

      marker = case file
               when /\.rs\z/ then %r{(?:^|\s)//+!?(.*)$}
               when /\.lua\z/ then /(?:^|\s)--+(.*)$/
               else /(?:^|\s)#(?:\s(.*))?$/
               end
      source.scan(marker).flatten.compact.join("\n")
    end

    # "transport/{a,b}.rs" as ["transport/a.rs", "transport/b.rs"].
    def expand(path)
      match = path.match(/\{([^}]*)\}/)
      return [path] unless match

      match[1].split(",").flat_map { |part| expand(match.pre_match + part + match.post_match) }
    end

    def exists?(path, file)
      return true if path.match?(ELSEWHERE)

      own = "#{File.dirname(file)}/"
      (BASES + [own]).any? { |base| File.exist?(File.join(ROOT, base + path)) }
    end

    # "file: path" for every named path that is nowhere.
    def missing
      files.flat_map do |file, kind|
        named = text(file, kind).gsub(%r{\w+://\S+}, "").scan(PATH).flatten
        named.map { |path| path.delete_suffix(".") }.flat_map { |path| expand(path) }
             .uniq.reject { |path| exists?(path, file) }.map { |path| "#{file}: #{path}" }
      end
    end

    # GitHub's anchor of a Markdown heading.
    def anchor(heading)
      heading.strip.downcase.gsub(/[^\p{Word}\- ]/, "").tr(" ", "-")
    end

    def anchors(doc)
      File.read(File.join(ROOT, doc)).scan(/^#+ (.+)$/).flatten.map { |heading| anchor(heading) }.to_set
    end

    # "doc: link" for every Markdown link to a doc's heading that is not there.
    def broken_anchors
      files.select { |_, kind| kind == :doc }.keys.flat_map do |doc|
        File.read(File.join(ROOT, doc)).scan(%r{\]\(([\w./-]*\.md)?#([\w-]+)\)}).filter_map do |target, name|
          target_file = target ? File.join(File.dirname(doc), target).delete_prefix("./") : doc
          next "#{doc}: #{target}##{name} (no such doc)" unless File.exist?(File.join(ROOT, target_file))

          "#{doc}: #{target}##{name}" unless anchors(target_file).include?(name)
        end
      end
    end
  end
end

RSpec.describe "Paths named in docs and comments" do
  it "finds files by the paths it reads (so the check below can fail)" do
    text = "see lib/ferrolock/dist_mutex.rb, src/transport/{spin,slot}.rs and lib/ferrolock/nothing_here.rb"
    found = text.scan(FerrolockTest::DocPaths::PATH).flatten.flat_map { |path| FerrolockTest::DocPaths.expand(path) }
    expect(found).to eq(%w[lib/ferrolock/dist_mutex.rb src/transport/spin.rs src/transport/slot.rs
                           lib/ferrolock/nothing_here.rb])
    expect(found.reject { |path| FerrolockTest::DocPaths.exists?(path, "README.md") })
      .to eq(%w[lib/ferrolock/nothing_here.rb])
  end

  it "names only files that exist (README.md, doc/*.md, and the comments of lib, spec, ext, bin, …)" do
    expect(FerrolockTest::DocPaths.missing).to eq([])
  end

  it "links only to headings that exist" do
    expect(FerrolockTest::DocPaths.broken_anchors).to eq([])
  end
end
