# frozen_string_literal: true

require "optparse"

module Ferrolock
  class Admin
    class Cli
      # How the `ferrolock` command tells options from operands (PATTERN, NAME). Options come
      # before the operands, and `--` ends them; after the first operand only TRAILING_FLAGS
      # still count (`release NAME --force` reads naturally). So an operand from a variable
      # (`ferrolock limiters -- "$P"`) is never an option, and the option that loads code never
      # takes its FILE in the same word (`-r./x.rb`, `--require=./x.rb`): that is refused.
      module Arguments
        # Flags still read after the first operand: they take no value and load nothing.
        TRAILING_FLAGS = %w[--json --force --clear --help -h].freeze
        # Options with a value still read after the first operand (`stats NAME --since 1h`).
        TRAILING_OPTIONS = %w[--since].freeze

        module_function

        # The global options parsed off `words`; the command and what follows it.
        def leading(parser, words)
          rest, after = order(parser, words)
          rest + after
        end

        # The command's options parsed off `words`; its operands.
        def operands(parser, words)
          attached_require!(words)
          rest, after = order(parser, words)
          rest.empty? ? after : trailing(parser, rest + after)
        end

        # OptionParser#order! up to a `--`: [the words from the first operand on, the words after
        # the `--`, led by the `--` itself when an operand came first].
        def order(parser, words)
          dashes = words.index("--")
          rest = parser.order!(dashes ? words[0...dashes] : words.dup)
          after = dashes ? words[(dashes + 1)..] : []
          rest.empty? || dashes.nil? ? [rest, after] : [rest, ["--", *after]]
        end

        def trailing(parser, words)
          operands = []
          until words.empty?
            word = words.shift
            next operands.concat(words.shift(words.size)) if word == "--"

            next parser.order!([word, *words.shift(1)]) if TRAILING_OPTIONS.include?(word)

            TRAILING_FLAGS.include?(word) ? parser.order!([word]) : operands << word
          end
          operands
        end

        # -rFILE, --require=FILE and its abbreviations (--req=FILE).
        def attached_require!(words)
          words.take_while { |word| word != "--" }.each do |word|
            long = word[/\A--([^=]+)=/m, 1]
            next unless word.match?(/\A-[a-zA-Z]*r./m) || (long && "require".start_with?(long))

            raise OptionParser::InvalidArgument.new(
              word, "(give --require FILE as two words; put -- before an operand starting with -)"
            )
          end
        end
      end
    end
  end
end
