# frozen_string_literal: true

require_relative "support/stack_versions"

# README.md's "Supported versions" table states what each bin/test stack runs: on the host and in the
# modern chroot (FERROLOCK_STACK=modern), the column of the stack running this spec must match the
# versions installed here, to the minor version (a Debian patch release passes). When a stack moves to
# another minor version, run `bin/versions --readme`.
RSpec.describe "README's Supported versions table" do
  versions = FerrolockTest::StackVersions

  it "states the versions this stack runs (#{versions.stack})" do
    stated = versions.readme_table.fetch(versions.stack).transform_values { |cell| versions.minor(cell) }
    installed = versions.current.transform_values { |cell| versions.minor(cell) }
    # Without ../shared/vendor the vendored Sidekiq leg is skipped (bin/test says so): nothing to hold it to.
    unless File.exist?(versions::SIDEKIQ7_VERSION_RB)
      stated["sidekiq"] = stated["sidekiq"].split(", ").grep_v(/\(vendored\)/).join(", ")
    end
    expect(stated).to eq(installed),
                      "README.md is out of date for the #{versions.stack} stack: run bin/versions --readme"
  end

  it "is what bin/versions writes from the stacks' versions" do
    readme = File.read(versions::README)
    table = versions.readme_table(readme)
    expect(versions.rewrite(readme, table)).to eq(readme)
    expect(table.keys).to eq(versions::STACKS.keys)
    expect(table.values.map(&:keys)).to all(eq(versions::ROWS.keys))
  end
end
