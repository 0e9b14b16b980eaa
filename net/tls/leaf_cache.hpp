// net/tls/leaf_cache.hpp: the bounded cache of minted leaf certificates, one per canonical
// host: least recently used out first, and an entry close to its end treated as a miss (so a
// long session never gets a leaf that expires under it). Pure bookkeeping, no OpenSSL calls.
#ifndef SANDBOX_NET_TLS_LEAF_CACHE_HPP
#define SANDBOX_NET_TLS_LEAF_CACHE_HPP

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

namespace sandbox::net::tls {

/// \brief LRU map from a canonical host to a value that expires (a leaf).
template <class Value> class leaf_cache
{
public:
    using clock = std::chrono::system_clock;

    /// `capacity` entries at most (0 is taken as 1); an entry with less than `renew_before`
    /// left is not returned.
    leaf_cache(std::size_t capacity, std::chrono::seconds renew_before)
        : capacity_(capacity == 0 ? 1 : capacity), renew_before_(renew_before)
    {}

    /// The entry of `host`, made the most recent; null when there is none or it ends within
    /// `renew_before` of `now` (then it is dropped).
    std::shared_ptr<const Value> find(const std::string& host, clock::time_point now)
    {
        auto it = index_.find(host);
        if (it == index_.end())
            return nullptr;
        if (it->second->not_after - now < renew_before_)
        {
            order_.erase(it->second);
            index_.erase(it);
            return nullptr;
        }
        order_.splice(order_.begin(), order_, it->second);
        return it->second->value;
    }

    /// Stores `value` for `host` as the most recent entry (replacing one there), evicting the
    /// least recently used beyond the capacity.
    void insert(const std::string& host, std::shared_ptr<const Value> value,
                clock::time_point not_after)
    {
        if (auto it = index_.find(host); it != index_.end())
        {
            order_.erase(it->second);
            index_.erase(it);
        }
        order_.push_front(entry{host, std::move(value), not_after});
        index_[host] = order_.begin();
        while (order_.size() > capacity_)
        {
            index_.erase(order_.back().host);
            order_.pop_back();
        }
    }

    std::size_t size() const noexcept { return order_.size(); }
    std::size_t capacity() const noexcept { return capacity_; }

private:
    struct entry
    {
        std::string host;
        std::shared_ptr<const Value> value;
        clock::time_point not_after;
    };
    std::size_t capacity_;
    std::chrono::seconds renew_before_;
    std::list<entry> order_;
    std::unordered_map<std::string, typename std::list<entry>::iterator> index_;
};

} // namespace sandbox::net::tls

#endif // SANDBOX_NET_TLS_LEAF_CACHE_HPP
