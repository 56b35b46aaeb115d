// "Largest" among the cards (tune/cards.h).
#include "tune/cards.h"

#include <algorithm>

namespace tune {

std::optional<int64_t> LargestBudget(const std::vector<Card>& cards) {
  std::optional<int64_t> largest;
  for (const Card& card : cards) {
    if (card.budget) largest = std::max(largest.value_or(INT64_MIN), *card.budget);
  }
  return largest;
}

size_t LargestCard(const std::vector<Card>& cards) {
  const std::optional<int64_t> largest = LargestBudget(cards);
  for (size_t k = 0; largest && k < cards.size(); ++k) {
    if (cards[k].budget == largest) return k;
  }
  return 0;
}

void MarkLargest(std::vector<Card>& cards) {
  const std::optional<int64_t> largest = LargestBudget(cards);
  for (Card& card : cards) card.largest = !largest || card.budget == largest;
}

}  // namespace tune
